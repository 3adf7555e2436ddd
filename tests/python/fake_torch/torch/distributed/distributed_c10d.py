"""torch.distributed.distributed_c10d of the stand-in: the default process group's store, a
FileStore over the group's folder with PyTorch's set, get and compare_set (atomic: the first
value written wins, as TCPStore's server decides)."""
import os
import time


class FileStore:
    def __init__(self, folder):
        self.folder = os.path.join(folder, "store")
        os.makedirs(self.folder, exist_ok=True)

    def _path(self, key):
        return os.path.join(self.folder, key.replace("/", "%2F"))

    def set(self, key, value):
        value = value.encode() if isinstance(value, str) else bytes(value)
        tmp = self._path(key) + ".tmp.%d" % os.getpid()
        with open(tmp, "wb") as f:
            f.write(value)
        os.replace(tmp, self._path(key))

    def get(self, key, timeout=300.0):
        deadline = time.monotonic() + timeout
        while not os.path.exists(self._path(key)):
            if time.monotonic() > deadline:
                raise RuntimeError("[stand-in store] timed out waiting for key " + key)
            time.sleep(0.01)
        with open(self._path(key), "rb") as f:
            return f.read()

    def compare_set(self, key, expected_value, desired_value):
        """PyTorch's: sets desired_value when the key holds expected_value, or when it is
        missing and expected_value is empty; returns what the key holds after."""
        desired = desired_value.encode() if isinstance(desired_value, str) else bytes(desired_value)
        expected = expected_value.encode() if isinstance(expected_value, str) else bytes(expected_value)
        if not expected:
            # written whole, then linked in: the name appears with its value or not at all
            tmp = self._path(key) + ".tmp.%d" % os.getpid()
            with open(tmp, "wb") as f:
                f.write(desired)
            try:
                os.link(tmp, self._path(key))
            except FileExistsError:
                pass
            finally:
                os.unlink(tmp)
            return self.get(key)
        if self.get(key, 0) == expected:
            self.set(key, desired)
        return self.get(key, 0)


def _get_default_store():
    from . import _state
    if _state is None:
        raise RuntimeError("Default process group has not been initialized, please make sure to "
                           "call init_process_group.")
    return FileStore(_state["dir"])
