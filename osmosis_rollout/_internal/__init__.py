"""Private helpers of the runtime: atomic files, JSON copies and text, ids, imports of extras."""
