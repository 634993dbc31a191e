"""Control plane: configuration, artifacts, the Triton model repository, workers, CLI."""
