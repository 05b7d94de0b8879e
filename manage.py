#!/usr/bin/env python
"""Django's command-line utility for memoryproject."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryproject.settings")
    if sys.argv[1:2] == ["mcp_serve"]:
        # The MCP server's start-up runs with the collector off until it serves (mcp_serve).
        from memoryproject.collector import start_up_pause
        from memoryproject.mcp_split import front_fork, split_wanted

        start_up_pause()
        if split_wanted(sys.argv[2:]):
            front_fork()  # over stdio the SDK starts in this process, the command in its child
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
