"""Front-ends: they render loop events and forward the user's input; nothing else."""
