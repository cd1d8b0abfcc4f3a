// Package jsontext is the relay's one JSON tokenizer. It checks JSON text
// strictly against RFC 8259 and walks it in place, without decoding it
// into values: strings (ScanString, AppendUnescaped), numbers
// (ScanNumber), whole values (SkipValue, Valid) and the members of an
// object (OpenObject). It allocates nothing on valid text, except to
// unescape a member name or an Unquote argument that has escapes.
//
// Every stage that reads JSON reads it through this package: the decoder
// (a logical message's content), the router (the headers column), the
// record's JSON value writer and the Avro encoder. So one text is valid
// for all of them or for none. The rules, in RFC 8259's terms:
//
//   - the grammar exactly: no leading zeros, no hex or special numbers
//     (NaN, Infinity), no trailing commas, no single quotes, no comments,
//     nothing but white space after the value;
//   - strings: no unescaped control character, only the escapes of
//     section 7, UTF-8 only (section 8.1: ErrBadUTF8), and every \u
//     surrogate paired (section 8.2's "unpredictable" strings:
//     ErrSurrogate);
//   - a member name given twice is valid JSON (section 4 says names
//     SHOULD be unique; jsonb keeps the last). A consumer that reads a
//     member by name refuses a second one itself (the decoder's outbox
//     columns, the Avro encoder's record fields);
//   - nesting deeper than MaxDepth is refused.
//
// Errors are *SyntaxError, which matches ErrSyntax with errors.Is and
// wraps the particular cause.
package jsontext
