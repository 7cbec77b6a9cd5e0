"""``python -m headlab.bench``: see :mod:`headlab.bench`."""
import sys
import warnings

# headlab.engine before anything imports OpenNMT-py: it defers OpenNMT-py's start-up imports
# of packages for transforms headlab never uses (spaCy, fastText...), which a GPU machine lacks
import headlab.engine  # noqa: F401,E402
from headlab.bench import main

warnings.filterwarnings("ignore", category=FutureWarning)
sys.exit(main())
