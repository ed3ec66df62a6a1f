"""The client's core, without I/O: everything Client (client.py, blocking
gRPC) and AsyncClient (aio.py, grpc.aio) share, as pure functions and small
classes that can be tested without a server.

    errors.py    TensorOpError and protocol_error
    requests.py  RunRequests: operator, attributes, outputs, inputs and their bytes
    chains.py    Step, StepRef and the RunChainRequest they make
    handles.py   RemoteTensors' handles, and the requests naming them
    routing.py   which replica a call goes to, and which call (Run, RunStream, RunChunked)
    chunking.py  RunChunked's and Put's parts, and the message limits they fit
    progress.py  progress callbacks' byte counts
    results.py   answers decoded and checked: Result, RunResponse, ResultParts
    window.py    run_many's bookkeeping over RunBidi
    shapes.py    output sizes that follow from a request, and the bytes its answer carries
    plans.py     each call as a plan: the gRPC calls to make, in order, and its result
    indexing.py  NumPy's conventions: axes from the end, numpy.split's parts, x[key] as attributes
    operators.py each operator's own method (Client.split, strided_slice, ...) as a plan
    gathers.py   take, gather, take_along_axis and gather_elements, the same way
    joins.py     concatenate and join, the same way
    pads.py      pad, the same way: numpy.pad's pad_width, modes and constant_values
    trace.py     the W3C traceparent in force (a context variable) and the metadata it makes

The transports make the gRPC calls a plan yields (plans.Call) and hand back
what each answered; nothing here opens a channel, sends or waits."""
