"""torch.distributed.device_mesh of the stand-in, as PyTorch 2.11 has it for what ranksnap's glue
and the test scripts touch: DeviceMesh(device_type, mesh, *, mesh_dim_names, ...) whose __init__
initialises the default process group when there is none (env://) and makes one group per
dimension with distributed_c10d's new_group (every rank calls it for every group of the
dimension, as PyTorch's does; bound at import, so never through torch.distributed.new_group);
mesh (the layout of the ranks, with tolist() and [i, j]), mesh_dim_names, get_local_rank,
get_group, mesh["dp"] (a slice made from its root's rank map, with no mesh argument, as 2.11's
_create_sub_mesh) and init_device_mesh(device_type, mesh_shape, *, mesh_dim_names), which, as
2.11's, gives DeviceMesh a layout and a rank map (here: the sizes, and the ranks in row-major
order), not a mesh."""
from . import get_rank, get_world_size, init_process_group, is_initialized
from . import new_group as _new_group

__all__ = ["init_device_mesh", "DeviceMesh"]


class _Layout:
    """The mesh tensor's part the stand-in needs: nested lists of ints."""

    def __init__(self, rows):
        self.rows = rows

    def tolist(self):
        return _copy(self.rows)

    @property
    def ndim(self):
        n, x = 0, self.rows
        while isinstance(x, list):
            n, x = n + 1, x[0]
        return n

    def size(self, dim=None):
        sizes, x = [], self.rows
        while isinstance(x, list):
            sizes.append(len(x))
            x = x[0]
        return tuple(sizes) if dim is None else sizes[dim]

    def __getitem__(self, index):
        x = self.rows
        for i in index if isinstance(index, tuple) else (index,):
            x = x[int(i)]
        return _Layout(x) if isinstance(x, list) else x


def _copy(x):
    return [_copy(y) for y in x] if isinstance(x, list) else int(x)


def _reshape(flat, sizes):
    if len(sizes) == 1:
        return flat[:sizes[0]]
    step = len(flat) // sizes[0]
    return [_reshape(flat[i * step:(i + 1) * step], sizes[1:]) for i in range(sizes[0])]


def _coords(rows, rank):
    if not isinstance(rows, list):
        return () if rows == rank else None
    for i, sub in enumerate(rows):
        at = _coords(sub, rank)
        if at is not None:
            return (i,) + at
    return None


def _lines(rows, dim, ndim):
    """Every group of dimension `dim`: the rank lists along it, one per other coordinates."""
    def at(c):
        x = rows
        for i in c:
            x = x[i]
        return x

    sizes, x = [], rows
    while isinstance(x, list):
        sizes.append(len(x))
        x = x[0]
    others = [[]]
    for d in range(ndim):
        if d != dim:
            others = [o + [i] for o in others for i in range(sizes[d])]
    out = []
    for o in others:
        line = []
        for i in range(sizes[dim]):
            c = list(o)
            c.insert(dim, i)
            line.append(at(c))
        out.append(line)
    return out


class DeviceMesh:
    def __init__(self, device_type, mesh=None, *, mesh_dim_names=None, backend_override=None,
                 _init_backend=True, _rank=None, _layout=None, _rank_map=None, _root_mesh=None):
        if mesh is not None:
            if _layout is not None or _rank_map is not None:
                raise TypeError("Cannot provide _layout and/or _rank_map if passing explicit mesh")
            rows = mesh.tolist() if hasattr(mesh, "tolist") else _copy(mesh)
        else:
            if _layout is None or _rank_map is None:
                raise TypeError("The mesh argument is required except for PRIVATE USAGE ONLY!")
            # the stand-in's layout is the sizes, the rank map read in row-major order
            rows = _reshape([int(r) for r in _rank_map], tuple(_layout))
        self._device_type = device_type
        self._rows = rows
        self._mesh_dim_names = tuple(mesh_dim_names) if mesh_dim_names else None
        self._root_mesh = _root_mesh
        self._groups = {}
        if _init_backend:
            if not is_initialized():
                init_process_group()
            ndim = _Layout(rows).ndim
            for dim in range(ndim):
                for line in _lines(rows, dim, ndim):
                    # every rank makes every group of the dimension, as new_group requires
                    g = _new_group(ranks=line, group_desc="mesh_%s" % (
                        self._mesh_dim_names[dim] if self._mesh_dim_names else "dim_%d" % dim))
                    if get_rank() in line:
                        self._groups[dim] = g
        self._coordinate_on_dim = list(_coords(rows, get_rank() if _rank is None else _rank) or ())

    @property
    def device_type(self):
        return self._device_type

    @property
    def mesh(self):
        return _Layout(self._rows)

    @property
    def mesh_dim_names(self):
        return self._mesh_dim_names

    @property
    def ndim(self):
        return _Layout(self._rows).ndim

    def _dim(self, mesh_dim):
        if isinstance(mesh_dim, str):
            if not self._mesh_dim_names or mesh_dim not in self._mesh_dim_names:
                raise KeyError(f"Mesh dimension '{mesh_dim}' does not exist.")
            return self._mesh_dim_names.index(mesh_dim)
        return 0 if mesh_dim is None else int(mesh_dim)

    def get_local_rank(self, mesh_dim=None):
        return self._coordinate_on_dim[self._dim(mesh_dim)]

    def get_group(self, mesh_dim=None):
        return self._groups[self._dim(mesh_dim)]

    def __getitem__(self, mesh_dim_names):
        names = (mesh_dim_names,) if isinstance(mesh_dim_names, str) else tuple(mesh_dim_names)
        if names == self._mesh_dim_names:
            return self
        if len(names) != 1:
            raise NotImplementedError("the stand-in slices one dimension")
        dim = self._dim(names[0])
        ndim = self.ndim
        line = next(l for l in _lines(self._rows, dim, ndim) if get_rank() in l)
        sub = DeviceMesh(self._device_type, _layout=(len(line),), _rank_map=line, mesh_dim_names=names,
                         _root_mesh=self._root_mesh or self, _init_backend=False)
        sub._groups = {0: self._groups.get(dim)}
        return sub


def init_device_mesh(device_type, mesh_shape, *, mesh_dim_names=None, backend_override=None):
    shape = tuple(mesh_shape)
    n = 1
    for s in shape:
        n *= s
    if not is_initialized():
        init_process_group()
    if n != get_world_size():
        raise RuntimeError(f"mesh {shape} is not the world of {get_world_size()} ranks")
    # as 2.11's: a layout and the identity rank map, no mesh argument
    return DeviceMesh(device_type=device_type, _layout=shape, _rank_map=list(range(n)),
                      mesh_dim_names=mesh_dim_names, backend_override=backend_override)
