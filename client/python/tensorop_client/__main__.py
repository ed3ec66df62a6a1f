"""python -m tensorop_client conformance ... (see tensorop_client.conformance)."""

import sys

from tensorop_client.conformance import main

sys.exit(main())
