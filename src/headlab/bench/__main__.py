"""``python -m headlab.bench``: see :mod:`headlab.bench`."""
import sys
import warnings

from headlab.bench import main

warnings.filterwarnings("ignore", category=FutureWarning)
sys.exit(main())
