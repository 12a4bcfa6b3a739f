"""The mock server's request handlers, one module per family of endpoints; each takes the
:class:`~loadgen.mock.state.MockState` it shares and raises
:class:`~loadgen.mock.bodies.RequestError` to refuse a request."""
