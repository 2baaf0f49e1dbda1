"""python -m rewriter"""

from .cli import main

main()
