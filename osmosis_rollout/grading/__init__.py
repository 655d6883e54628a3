"""What graders stand on: the judge's provider and the signature checks of reward functions."""
