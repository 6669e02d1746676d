"""Written with chatdata main at 227bfef (format version 1, before checksums)."""
import sys, torch, json
from chatdata import History, TensorDict
out = sys.argv[1]
chats = [[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2? é日本😀"},
          {"role": "assistant", "content": "4"}],
         [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]]
History.from_chats(chats).memmap(out + "/history")
TensorDict({"x": torch.arange(6, dtype=torch.float32).reshape(3, 2), "s": ["a", "bb", "ccc"],
            "nested": TensorDict({"y": torch.tensor([1, 2, 3], dtype=torch.int16)}, [3])}, [3]).memmap(out + "/tensordict")
