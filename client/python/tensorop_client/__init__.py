"""Python client for tensord (tensorop.v1.TensorOp).

import numpy as np
from tensorop_client import Client

x = np.arange(16, dtype=np.float32).reshape(4, 4)
with Client("127.0.0.1:50051") as client:
    result = client.run("slice", {"input": x[:, 1:]},  # a strided view, sent as is
                        {"offsets": [0, 0], "window_sizes": [4, 3], "window_strides": [2, 2]},
                        outputs=[(2, 2)])
result.outputs[0]  # array([[ 1.,  3.], [ 9., 11.]], dtype=float32)
"""

from tensorop_client.aio import AsyncClient
from tensorop_client.client import (
    BACKENDS,
    OPS,
    Client,
    Output,
    Result,
    TensorOpError,
    make_request,
)
from tensorop_client.tensors import (
    LayoutError,
    WireTensor,
    decode_array,
    encode_array,
    from_tensor,
    to_tensor,
)

__all__ = [
    "AsyncClient",
    "BACKENDS",
    "OPS",
    "Client",
    "LayoutError",
    "Output",
    "Result",
    "TensorOpError",
    "WireTensor",
    "decode_array",
    "encode_array",
    "from_tensor",
    "make_request",
    "to_tensor",
]
