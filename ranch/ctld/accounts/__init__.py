"""The accounting tree rctld keeps under AccountingStorageType=accounting_storage/slurmdbd."""
