"""_groups.py — the communicators this rank was in, from the DeviceMeshes and process groups the
script made: how `ranksnap report` groups the ranks of a pipeline x data-parallel job into roles
(a stage, a tensor rank) with no --groups (docs/PYTORCH.md, "Roles").

Two public constructors of torch.distributed are watched, at the moment they are called:
DeviceMesh.__init__ (init_device_mesh, DeviceMesh(...), DeviceMesh.from_group and _flatten build
through it) and torch.distributed.new_group. For a mesh, each dimension's group is the ranks that share
this rank's coordinates on the other dimensions (mesh.mesh, mesh.mesh_dim_names); its name is the
dimension's ("pp", "dp", "tp"). A group made with new_group has no name (""); one with the
members of a mesh dimension's group is that group (DeviceMesh makes its groups so), and one of
every rank tells nothing of roles (ranksnap's own gather group is one). A mesh sliced from
another (mesh["dp"]: made with neither ranks of its own nor groups) adds nothing its root did not
give, and is passed over.

Each group's id is a hash of its name and sorted members, so that every member computes the same
one in its own process; its rank is this rank's index among the sorted members, torch's group
rank. The work is done once per mesh or group made (0.1 ms for a 4x4x4 mesh, in calls that make
process groups, which take milliseconds); the dump only copies the list.
"""
import hashlib
import importlib

from . import _off, _wrap


def comm_id(name, members):
    """The id every member of the group computes alike: 64 bits of a hash of the name and the
    sorted ranks."""
    text = name + ":" + ",".join(str(r) for r in members)
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


def _rows(mesh, rank):
    """This rank's coordinates in the nested list `mesh`, None when it is not there."""
    if not isinstance(mesh, list):
        return () if mesh == rank else None
    for i, sub in enumerate(mesh):
        at = _rows(sub, rank)
        if at is not None:
            return (i,) + at
    return None


def _along(mesh, coords, dim):
    """The ranks of `mesh` (nested lists) at `coords`, every index along `dim`."""
    out = []
    for i in range(len(_at(mesh, coords[:dim]))):
        out.append(_at(mesh, coords[:dim] + (i,) + coords[dim + 1:]))
    return out


def _at(mesh, coords):
    for c in coords:
        mesh = mesh[c]
    return mesh


class Groups:
    def __init__(self, torch, on_group=None):
        self.torch = torch
        self.on_group = on_group   # called once the script has a group (the glue's identify)
        self.named = {}            # (name, sorted members) -> (members, the communicator): meshes'
        self.unnamed = {}          # sorted members -> (members, the communicator): new_group's

    def install(self):
        """Wraps DeviceMesh.__init__ and torch.distributed.new_group; nothing where
        torch.distributed is not available."""
        dist = getattr(self.torch, "distributed", None)
        # a PyTorch built without torch.distributed has no groups to watch: nothing is lost
        if dist is None or not getattr(dist, "is_available", lambda: False)():
            return
        try:
            dm = importlib.import_module("torch.distributed.device_mesh")
        except ImportError as e:  # groups made with new_group still give roles
            _off.off("roles", e)
            dm = None
        cls = getattr(dm, "DeviceMesh", None)
        init = getattr(cls, "__init__", None) if isinstance(cls, type) else None
        if init is not None and init is not object.__init__:
            def made(out, mesh, *args, **kwargs):
                # one that makes its groups (init_device_mesh's, a flattened one) or is given its
                # ranks (DeviceMesh(...), from_group); a slice has its root's groups
                if kwargs.get("_init_backend", True) or len(args) > 1 or kwargs.get("mesh") is not None:
                    self._on_mesh(mesh)

            cls.__init__ = _wrap.around(init, after=made)
        new_group = getattr(dist, "new_group", None)
        if new_group is not None:
            def grouped(group, *args, **kwargs):
                self._on_new_group(kwargs["ranks"] if "ranks" in kwargs else (args[0] if args else None))

            dist.new_group = _wrap.around(new_group, after=grouped)

    def _world(self):
        dist = self.torch.distributed
        return int(dist.get_rank()), int(dist.get_world_size())

    def _on_mesh(self, mesh):
        try:
            if self.on_group is not None:
                self.on_group()
            names = mesh.mesh_dim_names
            ranks = mesh.mesh.tolist()
            rank, _ = self._world()
            coords = _rows(ranks, rank)
            if coords is None:
                return
            for dim in range(len(coords)):
                name = str(names[dim]) if names and dim < len(names) else ""
                members = tuple(sorted(set(int(r) for r in _along(ranks, coords, dim))))
                self._add(self.named, (name, members), name, members, rank)
        except Exception as e:  # a release that changed DeviceMesh's layout: said, never raised
            _off.off("roles", e)

    def _on_new_group(self, ranks):
        try:
            if ranks is None:
                return  # every rank
            rank, world = self._world()
            members = tuple(sorted(set(int(r) for r in ranks)))
            if rank in members and len(members) < world:
                self._add(self.unnamed, members, "", members, rank)
        except Exception as e:
            _off.off("roles", e)

    @staticmethod
    def _add(into, key, name, members, rank):
        if key not in into:
            into[key] = (members, {"id": comm_id(name, members), "size": len(members),
                                   "rank": members.index(rank), "kind": "torch", "name": name,
                                   "allreduces": 0})

    def communicators(self):
        """For the pickle's ranksnap key: the mesh dimensions' groups, then the other groups; a
        group with no name whose members a named one has is that one."""
        made = list(self.named.values()) + list(self.unnamed.values())
        has_name = {members for members, c in made if c["name"]}
        return [dict(c) for members, c in made if c["name"] or members not in has_name]
