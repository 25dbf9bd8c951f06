"""protocol: the wire between rctld, rnoded and the commands (messages, codec, frames, key).

Import the submodules directly (ranch.protocol.client must stay free of trio for fast CLI start).
"""
