"""The broker process: configuration, network layer, request dispatch and handlers."""
