# The soak's JSON queries (gpu_kill_soak.bats), as named definitions:
#   jq -L "$BATS_TEST_DIRNAME" 'include "soak"; NAME(...)'

# {"<pool>/<device>": "<uuid>"} of the ResourceSlices in the input (a List).
def device_uuids:
  [.items[] | .spec.pool.name as $p | .spec.devices[]? | {key: "\($p)/\(.name)", value: .attributes.uuid.string}]
  | from_entries;

# The names of the soak pods that wait for the kubelet, one per output: the Pending pods (of $pods,
# a pod List) with a FailedPrepareDynamicResources event (of the input, an event List) at or after
# $since, and the pods terminating since before $old (RFC 3339 times).
def waiting_pods($pods; $since; $old):
  ($pods.items | map(select(.metadata.deletionTimestamp == null and .status.phase == "Pending") | .metadata.name)) as $pending
  | ([.items[] | select((.lastTimestamp // .eventTime // "") >= $since) | .involvedObject.name]
     | unique | map(select(. as $n | $pending | index($n))))
    + ($pods.items | map(select(.metadata.deletionTimestamp != null
        and (.metadata.deletionTimestamp | fromdate) - (.metadata.deletionGracePeriodSeconds // 0) <= ($old | fromdate))
        | .metadata.name))
  | .[];

# One line per fact of a plugin checkpoint (the input): "K <uid>" per entry, "N <uid>" per entry not
# PrepareCompleted, "T <uuid>" per GPU a claim time-sliced, "M <id>" per MPS daemon a claim started.
def checkpoint_entries:
  .data.preparedClaims | to_entries[]
  | "K \(.key)",
    (select(.value.state != "PrepareCompleted") | "N \(.key)"),
    (.value | (.preparedDevices[]? | select(.timeSliceApplied == true) | "T \(.uuid)"),
      (.steps[]? | select(.name == "timeSlicing") | .undo[]?.gpus[]? | "T \(.)"),
      (.steps[]? | select(.name == "mpsDaemons") | .undo[]?.id | "M \(.)"));

# "<pod>\t<pod uid>\t<device UUIDs, sorted, space-separated>" per Running pod of the input (a pod
# List): the UUIDs ($uuids, device_uuids) of the devices its claims ($claims, a claim List) are
# allocated; "unknown:<pool>/<device>" for a device no slice announced.
def pod_devices($claims; $uuids):
  ($claims.items | map({key: .metadata.name, value: [.status.allocation.devices.results[]? | "\(.pool)/\(.device)"]})
   | from_entries) as $alloc
  | .items[] | select(.status.phase == "Running")
  | [.metadata.name, .metadata.uid,
     ([(.status.resourceClaimStatuses[]?.resourceClaimName // empty), (.spec.resourceClaims[]? | .resourceClaimName // empty)]
      | unique | map($alloc[.] // [] | .[]) | map($uuids[.] // "unknown:\(.)") | sort | join(" "))]
  | @tsv;
