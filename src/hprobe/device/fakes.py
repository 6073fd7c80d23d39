"""What the faked GPU answers to the device queries flashinfer makes."""

from __future__ import annotations

from hprobe.model.sm import SM


class FakeDeviceProperties:
    """What `torch.cuda.get_device_properties` returns for the target GPU."""

    def __init__(self, sm: SM):
        self.name = f"hprobe target {sm}"
        self.major, self.minor = sm.major, sm.minor
        # Sizes of a large part of that family; validators read them only to
        # size workspaces, never to decide head counts.
        self.multi_processor_count = 148 if sm.major >= 10 else 132
        self.total_memory = 80 * 2**30
        self.shared_memory_per_block_optin = 227 * 1024
        self.shared_memory_per_multiprocessor = 228 * 1024
        self.max_threads_per_multi_processor = 2048
        self.L2_cache_size = 50 * 2**20
        self.warp_size = 32
        self.is_integrated = False
        self.is_multi_gpu_board = False
        self.uuid = "hprobe-fake"
