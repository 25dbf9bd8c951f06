"""ctld."""
