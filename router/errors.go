package router

import "errors"

// ErrInvalidTopic means a topic name Kafka would reject.
var ErrInvalidTopic = errors.New("invalid topic name")

// ErrHeadersNotObject means the headers column holds JSON that is not an object.
var ErrHeadersNotObject = errors.New("headers column is not a JSON object")

// ErrBadJSON means the headers column is not valid JSON.
var ErrBadJSON = errors.New("headers column is not valid JSON")
