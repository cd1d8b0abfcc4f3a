"""Decode Kafka records with the CloudEvents Python SDK's Kafka binding.

Reads one JSON object per line on stdin: {"headers": {name: base64},
"key": base64, "value": base64}. Writes one JSON object per line: the
event's attributes as the SDK reads them, and its data in base64. Used by
cmd/cdc-relay's TestCloudEvents as an independent CloudEvents reader.
"""
import base64
import json
import sys

from cloudevents.kafka import KafkaMessage, from_binary

for line in sys.stdin:
    rec = json.loads(line)
    headers = {k: base64.b64decode(v) for k, v in rec["headers"].items()}
    msg = KafkaMessage(headers=headers, key=base64.b64decode(rec["key"]), value=base64.b64decode(rec["value"]))
    event = from_binary(msg, data_unmarshaller=lambda b: b)
    out = {k: str(v) for k, v in event.get_attributes().items()}
    out["data"] = base64.b64encode(event.get_data() or b"").decode()
    print(json.dumps(out), flush=True)
