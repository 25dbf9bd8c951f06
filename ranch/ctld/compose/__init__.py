"""The composition root: where the controller's owners are built and handed to each other."""
