"""Writes a SIZE x SIZE gradient as PNG with numpy and pillow, and says what it used."""
import json
import sys

import numpy as np
from PIL import Image

out = sys.argv[1] if len(sys.argv) > 1 else "thumb.png"
size = int(sys.argv[2]) if len(sys.argv) > 2 else 64
ramp = np.linspace(0, 255, size, dtype=np.uint8)
pixels = np.stack([np.tile(ramp, (size, 1))] * 3, axis=-1)
Image.fromarray(pixels, "RGB").save(out)
print(json.dumps({
    "numpy": np.__version__,
    "pillow": Image.__version__,
    "numpy_from": np.__file__,
    "out": out,
    "mean": float(pixels.mean()),
}))
