"""Decode Kafka records with the CloudEvents Python SDK.

Reads one JSON object per line on stdin: {"headers": {name: base64},
"key": base64, "value": base64}. Writes one JSON object per line: the
event's attributes as the SDK reads them, and its data in base64 ("data"),
or, for JSON data in a structured event, as JSON text ("data_json"). Used
by cmd/cdc-relay's CloudEvents tests as an independent CloudEvents reader.

A binary-mode record goes through the SDK's Kafka binding. A
structured-mode record (content-type application/cloudevents+json) goes
through the SDK's reader of the JSON event format, with the record's
content-type: the SDK's Kafka from_structured would take every header,
content-type included, for an attribute, which the Kafka binding does not.
"""
import base64
import json
import sys

from cloudevents.http import from_http
from cloudevents.kafka import KafkaMessage, from_binary

STRUCTURED = "application/cloudevents+json"

for line in sys.stdin:
    rec = json.loads(line)
    headers = {k: base64.b64decode(v) for k, v in rec["headers"].items()}
    value = base64.b64decode(rec["value"])
    content_type = headers.get("content-type", b"").decode()
    out = {}
    if content_type.split(";")[0].strip() == STRUCTURED:
        event = from_http({"content-type": content_type}, value, data_unmarshaller=lambda b: b)
        out["mode"] = "structured"
    else:
        msg = KafkaMessage(headers=headers, key=base64.b64decode(rec["key"]), value=value)
        event = from_binary(msg, data_unmarshaller=lambda b: b)
        out["mode"] = "binary"
    out.update({k: str(v) for k, v in event.get_attributes().items()})
    data = event.get_data()
    if isinstance(data, str):
        out["data_json"] = data
    else:
        out["data"] = base64.b64encode(data or b"").decode()
    print(json.dumps(out), flush=True)
