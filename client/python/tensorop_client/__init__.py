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

`__version__` is tensorop's one version, the string `tensord --version` and
`tensorctl --version` print (e.g. 0.1.0+g2ec2a5b.dirty), fixed when the
package was built. `traceparent(value)` sends a W3C traceparent with every
call made inside it (tensorop_client._core.trace); `new_traceparent()` makes one.
"""

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _distribution_version

from tensorop_client._core.trace import new_traceparent, traceparent
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

try:
    # setup.py sets it from cmake/version.cmake at build time.
    __version__ = _distribution_version("tensorop-client")
except PackageNotFoundError:  # imported from a tree that was never installed
    __version__ = "0+unknown"

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
    "new_traceparent",
    "to_tensor",
    "traceparent",
    "__version__",
]
