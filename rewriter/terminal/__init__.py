"""What the command line shows on a terminal: the optimize report's tables, the progress bar
of a long run, the rule listing.  Each function is given the rich console(s) to print to,
so that this package never reaches back into ``cli``."""
