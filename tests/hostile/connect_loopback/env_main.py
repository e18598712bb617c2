"""Hostile env: step connects to a loopback port named in the level. Expected: exception (no
network).
"""
import builtins

from pipeline.runtime import SkinEnv

# Hidden from the static scan: the sandbox itself must cut the network.
_socket = getattr(builtins, "__imp" + "ort__")("soc" + "ket")


class ConnectLoopback(SkinEnv):
    def transition(self, action):
        conn = _socket.create_connection(("127.0.0.1", int(self._state["port"])), timeout=1)
        conn.sendall(b"escaped")
        conn.close()
        return self._state

    def reward(self, action):
        return 0.0, [], {}
