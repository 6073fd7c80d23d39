"""The emulated GPU: a flashinfer session on a faked SM, stand-ins at the
compiled boundary, faked CUDA tensors, and how a call ended."""
