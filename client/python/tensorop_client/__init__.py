"""Python client for tensord (tensorop.v1.TensorOp).

import numpy as np
from tensorop_client import Client

x = np.arange(16, dtype=np.float32).reshape(4, 4)
attrs = {"offsets": [0, 0], "window_sizes": [4, 3], "window_strides": [2, 2]}
with Client("127.0.0.1:50051") as client:
    result = client.run("slice", {"input": x[:, 1:]},  # a strided view, sent as is
                        attrs, outputs=[(2, 2)])
    with client.put(x[:, 1:]) as h:  # a RemoteTensor: stays on the server until released
        kept = client.run("slice", {"input": h}, attrs, outputs=[(2, 2)], keep=True)
        kept.outputs[0].fetch()  # the same array as result.outputs[0], fetched when wanted
        kept.outputs[0].release()
result.outputs[0]  # array([[ 1.,  3.], [ 9., 11.]], dtype=float32)
"""

from tensorop_client.aio import AsyncClient, AsyncRemoteTensor
from tensorop_client.client import (
    BACKENDS,
    OPS,
    Client,
    Output,
    RemoteTensor,
    Result,
    Step,
    StepRef,
    TensorOpError,
    keep_outputs,
    make_chain_request,
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
    "AsyncRemoteTensor",
    "BACKENDS",
    "OPS",
    "Client",
    "LayoutError",
    "Output",
    "RemoteTensor",
    "Result",
    "Step",
    "StepRef",
    "TensorOpError",
    "WireTensor",
    "decode_array",
    "encode_array",
    "from_tensor",
    "keep_outputs",
    "make_chain_request",
    "make_request",
    "to_tensor",
]
