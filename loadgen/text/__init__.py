"""Text and tokens on the client: the local tokenizer (``tokenizer``: a path, a hub name or the
packaged one, and the ``TokenCodec`` protocol every tokenizer meets) and chat templates
(``chat_template``). The server's own tokenizer and the alignment of prompts to it talk to the
server, so they live in ``loadgen.server`` (``tokenizer``, ``alignment``).
"""
