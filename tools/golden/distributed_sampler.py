"""Expected partitions for tests/data.rs's `distributed_sampler_matches_pytorch`: PyTorch's own
DistributedSampler for each (n, num_replicas, shuffle, seed, epoch, drop_last), every rank.
Prints the Rust table to paste. Run: /work/venv/bin/python tools/golden/distributed_sampler.py"""
from torch.utils.data.distributed import DistributedSampler

CASES = [
    (10, 3, False, 0, 0, False),
    (10, 3, False, 0, 0, True),
    (10, 3, True, 0, 0, False),
    (10, 3, True, 0, 1, False),
    (17, 4, True, 5, 2, True),
    (17, 4, True, 5, 2, False),
    (5, 8, True, 1, 0, False),
    (5, 8, False, 0, 0, True),
    (0, 2, True, 0, 0, False),
    (50, 2, True, 42, 7, False),
    (23, 3, True, 2**33 + 9, 3, True),
]

print("const PYTORCH_PARTITIONS: &[Partition] = &[")
for n, r, shuffle, seed, epoch, drop_last in CASES:
    ranks = []
    for rank in range(r):
        s = DistributedSampler(range(n), num_replicas=r, rank=rank, shuffle=shuffle, seed=seed, drop_last=drop_last)
        s.set_epoch(epoch)
        ranks.append(list(s))
    body = ", ".join("&[" + ", ".join(map(str, x)) + "]" for x in ranks)
    print(f"    ({n}, {r}, {str(shuffle).lower()}, {seed}, {epoch}, {str(drop_last).lower()}, &[{body}]),")
print("];")
