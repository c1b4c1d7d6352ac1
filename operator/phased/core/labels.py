"""Names Phased writes onto Nodes and Pods: the cluster is the record of who holds what.

A node belongs to a job's pool while it carries ``LABEL_JOB_UID`` and this installation's
``LABEL_INSTALLATION``; its ``LABEL_ROLE`` says whether it runs a worker (active), waits as
a spare, or is quarantined. The ``TAINT_POOL`` taint (value: the job's UID) keeps every
other workload off it. Which marks make a node someone's, and what Phased does with a node
carrying marks it did not write, is in :mod:`phased.core.ownership`.
"""

from __future__ import annotations

PREFIX = "phased.dev"

# On Nodes
LABEL_JOB_UID = f"{PREFIX}/job-uid"  # the owning TrainingJob's metadata.uid
LABEL_JOB = f"{PREFIX}/job"  # its name, for people and selectors
LABEL_JOB_NAMESPACE = f"{PREFIX}/job-namespace"
LABEL_ROLE = f"{PREFIX}/role"  # active | spare | quarantined
LABEL_INSTALLATION = f"{PREFIX}/installation"  # settings.installation of the claiming operator
TAINT_POOL = f"{PREFIX}/pool"  # NoSchedule, value = job UID
TAINT_QUARANTINE = f"{PREFIX}/quarantined"  # NoSchedule|NoExecute on a quarantined node
TAINT_SPARE = f"{PREFIX}/spare"  # NoSchedule on a Preemptible spare (others may tolerate it)
ANNOTATION_QUARANTINE = f"{PREFIX}/quarantine"  # JSON: reason, message, detected, cordoned, job
ANNOTATION_CLAIMED_AT = f"{PREFIX}/claimed-at"  # when Phased claimed it (guests came later)
# On an active node whose guests must still leave: when it became active (the eviction
# deadline counts from here); removed once no guest is left.
ANNOTATION_CLEARING = f"{PREFIX}/clearing-since"
# On a spare promoted to replace a failed node: "<failed node> <RFC 3339 time>", so a ledger
# entry rebuilt after a lost status write still knows its replacement.
ANNOTATION_REPLACES = f"{PREFIX}/replaces"
# On a spare that was an active node on which a worker never started while its peers did
# (swapped out for it: phased.core.recovery.swap_stalled): "<RFC 3339 time> <what it did>".
# Such a spare is promoted last and given up first; the mark goes with its next role
# change (a promotion, as the last resort, tries it again) or its release.
ANNOTATION_STALLED = f"{PREFIX}/stalled"

# What cluster autoscalers read as "do not remove this node": Cluster Autoscaler's
# scale-down-disabled and Karpenter's do-not-disrupt, each "true". Phased writes those a held
# node lacks, and names the ones it wrote in ANNOTATION_GUARDS (comma-separated), so that a
# release takes away only those: a guard an admin had set stays. Neither is an ownership
# mark.
SCALE_DOWN_GUARDS = (
    "cluster-autoscaler.kubernetes.io/scale-down-disabled",
    "karpenter.sh/do-not-disrupt",
)
ANNOTATION_GUARDS = f"{PREFIX}/scale-down-guards"

# On TrainingJobs, set by a person (``phased proceed``): an RFC 3339 time at or after the
# breaker tripped releases it once (see phased.core.failure).
ANNOTATION_PROCEED = f"{PREFIX}/proceed-after-mass-failure"

# Every mark that says "a Phased installation holds this node". A node carrying any of them
# is never claimed, whoever wrote it (phased.core.ownership).
OWNERSHIP_LABELS = (LABEL_JOB_UID, LABEL_JOB, LABEL_JOB_NAMESPACE, LABEL_ROLE, LABEL_INSTALLATION)
OWNERSHIP_ANNOTATIONS = (
    ANNOTATION_CLAIMED_AT,
    ANNOTATION_QUARANTINE,
    ANNOTATION_CLEARING,
    ANNOTATION_REPLACES,
    ANNOTATION_STALLED,
)
OWNERSHIP_TAINTS = (TAINT_POOL, TAINT_QUARANTINE, TAINT_SPARE)

# On Pods and Services
LABEL_PHASE = f"{PREFIX}/phase"
LABEL_RANK = f"{PREFIX}/rank"
LABEL_GENERATION = f"{PREFIX}/restart-generation"
LABEL_ATTEMPT = f"{PREFIX}/attempt"  # replacements of one rank within a generation: 1, 2, ...
LABEL_WORLD_SIZE = f"{PREFIX}/world-size"  # the generation's world size, read back by decide
# The job's restart counts when the worker was made, read back so a lost status write never
# loses a restart (nor gives back restart budget).
LABEL_RESTARTS = f"{PREFIX}/restarts"
LABEL_WORKER_RESTARTS = f"{PREFIX}/worker-restarts"
# "true" when the worker was made to report checkpoints (the report endpoint and token in its
# environment), "false" otherwise: reports are judged only for workers that can make them.
LABEL_REPORTING = f"{PREFIX}/reporting"
# A digest of what the spec made the worker from (its phase's merged template, launcher and
# checkpoint settings): a rank is replaced alone only beside peers made from the same.
LABEL_WORKER_SPEC = f"{PREFIX}/worker-spec"
# The checkpoint interval the worker was told (PHASED_CHECKPOINT_INTERVAL_SECONDS), in seconds:
# its generation is judged stale by it, whatever checkpoint.interval was edited to since.
LABEL_CHECKPOINT_INTERVAL = f"{PREFIX}/checkpoint-interval"
# The checkpoint step a worker was told to resume from (PHASED_RESUME_STEP); absent when none.
LABEL_RESUME_STEP = f"{PREFIX}/resume-step"
# The GPU shape the worker was made for: its phase's gpusPerNode, and its gpuTypes in order
# joined by GPU_TYPES_SEPARATOR ("" for a CPU phase). Read back when the status write that
# recorded a phase's start, with its shape, was lost (phased.core.podlabels.made_shape).
LABEL_GPUS_PER_NODE = f"{PREFIX}/gpus-per-node"
LABEL_GPU_TYPES = f"{PREFIX}/gpu-types"
GPU_TYPES_SEPARATOR = "."
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_BY = "phased"

# Simulation / test hooks understood by the local KWOK cluster (never set by the operator).
ANNOTATION_SIM_PREFIX = "sim.phased.dev"
