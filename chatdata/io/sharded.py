def open_dataset(*a, **k): pass
class ShardedDataset: pass
