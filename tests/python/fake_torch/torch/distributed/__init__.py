"""torch.distributed of the stand-in: a process group over a shared folder (init_method
"file://DIR", or "env://", PyTorch's default, which meets at MASTER_ADDR:MASTER_PORT: here the
folder fake-torch-ADDR-PORT in the temporary directory), with the collectives ranksnap's glue
uses: new_group (every rank calls it for every group, as PyTorch requires), gather_object, broadcast_object_list, barrier; and the group's store
(distributed_c10d._get_default_store). Every collective has a sequence number; each rank writes
its pickled object into DIR, the root waits for all of them (at most the group's timeout, then
RuntimeError, as gloo times out), the others wait for the root's answer where there is one."""
import datetime
import os
import pickle
import tempfile
import time

_state = None


class _Group:
    def __init__(self, name, timeout):
        self.name = name
        self.timeout = timeout.total_seconds() if timeout else 1800.0
        self.seq = 0


def is_available():
    return True


def is_initialized():
    return _state is not None


def init_process_group(backend="gloo", init_method=None, rank=None, world_size=None,
                       timeout=datetime.timedelta(seconds=60)):
    global _state
    if not init_method or init_method == "env://":
        # PyTorch's env:// reads MASTER_ADDR, MASTER_PORT, and RANK and WORLD_SIZE unless given
        folder = os.path.join(tempfile.gettempdir(), "fake-torch-%s-%s" % (
            os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"]))
    elif init_method.startswith("file://"):
        folder = init_method[len("file://"):]
    else:
        raise ValueError("the stand-in takes init_method 'env://' or 'file://DIR'")
    os.makedirs(folder, exist_ok=True)
    rank = int(os.environ["RANK"]) if rank is None else rank
    world_size = int(os.environ["WORLD_SIZE"]) if world_size is None else world_size
    _state = {"dir": folder, "rank": rank, "size": world_size, "groups": 0,
              "default": _Group("default", timeout)}


def destroy_process_group(group=None):
    global _state
    _state = None


def get_rank(group=None):
    return _state["rank"]


def get_world_size(group=None):
    return _state["size"]


def new_group(ranks=None, timeout=None, backend=None, pg_options=None,
              use_local_synchronization=False, group_desc=None, device_id=None):
    _state["groups"] += 1
    return _Group(f"g{_state['groups']}", timeout)


def _put(group, seq, who, obj):
    path = os.path.join(_state["dir"], f"{group.name}.{seq}.{who}")
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        pickle.dump(obj, f)
    os.replace(tmp, path)


def _get(group, seq, who):
    path = os.path.join(_state["dir"], f"{group.name}.{seq}.{who}")
    deadline = time.monotonic() + group.timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise RuntimeError(f"[stand-in gloo] Timed out waiting {group.timeout}s for {path}")
        time.sleep(0.01)
    with open(path, "rb") as f:
        return pickle.load(f)


def gather_object(obj, object_gather_list=None, dst=0, group=None):
    group = group or _state["default"]
    group.seq += 1
    _put(group, group.seq, _state["rank"], obj)
    if _state["rank"] == dst:
        for r in range(_state["size"]):
            object_gather_list[r] = _get(group, group.seq, r)


def broadcast_object_list(object_list, src=0, group=None):
    group = group or _state["default"]
    group.seq += 1
    if _state["rank"] == src:
        _put(group, group.seq, "root", list(object_list))
    else:
        object_list[:] = _get(group, group.seq, "root")


def barrier(group=None):
    group = group or _state["default"]
    group.seq += 1
    _put(group, group.seq, _state["rank"], None)
    for r in range(_state["size"]):
        _get(group, group.seq, r)


from . import distributed_c10d  # noqa: E402,F401  (PyTorch's module of that name)
