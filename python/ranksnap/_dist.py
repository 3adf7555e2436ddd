"""_dist.py — ranksnap's gather over the job's own torch.distributed process group.

Under torchrun there is no MPI; when the training script initialised torch.distributed, rank 0
gathers the ranks' summaries and chosen pickles over it (include/ranksnap.h, the recorder's
gather and bcast). On a gloo group of ranksnap's own: gather_object over an NCCL group would put
the bytes on the GPU being measured, and a group of its own keeps ranksnap's collectives out of
the job's. Creating a group is collective; the first range end, which every rank reaches at the
same step, is where it happens. A collective that fails (a rank gone, the timeout passed) makes
the group unusable: ranksnap then meets in RANKSNAP_DIR's files.
"""
import datetime


class Group:
    def __init__(self, torch):
        self.torch = torch
        self.group = None
        self.broken = False

    def _get(self, timeout_s):
        dist = getattr(self.torch, "distributed", None)
        if self.broken or dist is None or not dist.is_available() or not dist.is_initialized():
            return None
        if self.group is None:
            self.group = dist.new_group(backend="gloo",
                                        timeout=datetime.timedelta(seconds=max(1, timeout_s)))
        return self.group

    def gather(self, data, timeout_s):
        """Every rank's bytes on rank 0 (a list, None on the others); None when there is no
        group. Raises when the collective fails."""
        group = self._get(timeout_s)
        if group is None:
            return None
        dist = self.torch.distributed
        out = [None] * dist.get_world_size() if dist.get_rank() == 0 else None
        try:
            dist.gather_object(data, out, dst=0, group=group)
        except Exception:
            self.broken = True
            raise
        return out if out is not None else []

    def bcast(self, data, timeout_s):
        """Rank 0's bytes on every rank; None when there is no group."""
        group = self._get(timeout_s)
        if group is None:
            return None
        box = [data]
        try:
            self.torch.distributed.broadcast_object_list(box, src=0, group=group)
        except Exception:
            self.broken = True
            raise
        return box[0]
