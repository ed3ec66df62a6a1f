"""gRPC stubs generated from proto/tensorop/v1/tensorop.proto when the package is built."""
