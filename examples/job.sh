#!/bin/sh
# An example batch script: rbatch reads the #SBATCH (or #RANCH) lines before the first command,
# as sbatch does; options on the command line win over them. Try: rbatch examples/job.sh hello
#SBATCH --job-name=hello
#SBATCH --cpus-per-task=1
#SBATCH --time=10:00
#SBATCH --output=%x-%j.out
echo "job $SLURM_JOB_ID ($SLURM_JOB_NAME) on $SLURMD_NODENAME, in $PWD: $*"
sleep 600
