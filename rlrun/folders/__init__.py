"""Run and sweep folders as files: their saved configs, checkpoint folders and checksums, the
lock that keeps one writer per folder, what a run records to be reproduced, and resuming. Light
(no torch): the console script reads and checks them before anything heavy is imported."""
