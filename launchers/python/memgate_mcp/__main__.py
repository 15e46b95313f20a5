import sys

from memgate_mcp import main

sys.exit(main())
