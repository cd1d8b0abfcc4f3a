package schemaregistry

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/hamba/avro/v2"
)

// Avro binary to plain JSON: the reverse of the JSON rules Append encodes
// by, for a reader (cdc-relay tail) that knows only the writer schema.
// "Plain" means the JSON a payload would be written in, not Avro's JSON
// encoding: a union's value stands bare, without {"type": value}. So that
// the encoder takes the output back:
//   - date is "YYYY-MM-DD"; time-millis and time-micros "HH:MM:SS[.fraction]";
//     timestamp-millis and timestamp-micros RFC 3339 in UTC with a Z; the
//     local-timestamp types the same without an offset;
//   - decimal is a string of its exact digits ("12.50"), never a float;
//   - bytes and fixed are a string when they are UTF-8, else
//     {"base64": "..."};
//   - float and double are numbers; NaN and the infinities, which JSON
//     lacks, the strings "NaN", "Infinity" and "-Infinity".

// maxDecodedJSON bounds the JSON one value decodes to: a few bytes of Avro
// can claim a block of billions of nulls.
const maxDecodedJSON = 64 << 20

// maxDecodeDepth bounds the nesting of a recursive schema's values.
const maxDecodeDepth = 1000

var errDecodedTooLarge = errors.New("the value decodes to more than 64 MiB of JSON")

// AppendJSON appends to dst the plain JSON of body, the Avro binary
// encoding of one value of s (without the wire-format header). It fails
// when body does not hold exactly one value of s.
func AppendJSON(dst []byte, s avro.Schema, body []byte) ([]byte, error) {
	d := &avroDec{data: body, dst: dst, limit: len(dst) + maxDecodedJSON}
	if err := d.value(s, 0); err != nil {
		return dst, fmt.Errorf("decode Avro at byte %d: %w", d.pos, err)
	}
	if d.pos != len(body) {
		return dst, fmt.Errorf("decode Avro: %d bytes left after the value", len(body)-d.pos)
	}
	return d.dst, nil
}

// avroDec reads Avro binary and writes JSON.
type avroDec struct {
	data  []byte
	pos   int
	dst   []byte
	limit int // len(dst) may not pass it
}

var errShort = errors.New("the value ends early")

func (d *avroDec) long() (int64, error) {
	var u uint64
	for shift := uint(0); shift < 64; shift += 7 {
		if d.pos >= len(d.data) {
			return 0, errShort
		}
		c := d.data[d.pos]
		d.pos++
		u |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return int64(u>>1) ^ -int64(u&1), nil
		}
	}
	return 0, errors.New("a varint longer than 10 bytes")
}

func (d *avroDec) take(n int64) ([]byte, error) {
	if n < 0 || n > int64(len(d.data)-d.pos) {
		if n < 0 {
			return nil, fmt.Errorf("negative length %d", n)
		}
		return nil, errShort
	}
	b := d.data[d.pos : d.pos+int(n)]
	d.pos += int(n)
	return b, nil
}

func (d *avroDec) value(s avro.Schema, depth int) error {
	if depth > maxDecodeDepth {
		return fmt.Errorf("values nested more than %d deep", maxDecodeDepth)
	}
	if len(d.dst) > d.limit {
		return errDecodedTooLarge
	}
	switch s := s.(type) {
	case *avro.RefSchema:
		return d.value(s.Schema(), depth+1)
	case *avro.NullSchema:
		d.dst = append(d.dst, "null"...)
		return nil
	case *avro.PrimitiveSchema:
		return d.primitive(s)
	case *avro.FixedSchema:
		b, err := d.take(int64(s.Size()))
		if err != nil {
			return err
		}
		if dec, ok := s.Logical().(*avro.DecimalLogicalSchema); ok {
			d.dst = appendDecimalString(d.dst, b, dec.Scale())
			return nil
		}
		d.dst = appendBytesJSON(d.dst, b)
		return nil
	case *avro.EnumSchema:
		i, err := d.long()
		if err != nil {
			return err
		}
		if i < 0 || i >= int64(len(s.Symbols())) {
			return fmt.Errorf("enum %s has no symbol %d", s.FullName(), i)
		}
		d.dst = AppendQuoted(d.dst, s.Symbols()[i])
		return nil
	case *avro.ArraySchema:
		d.dst = append(d.dst, '[')
		first := true
		err := d.blocks(func() error {
			if !first {
				d.dst = append(d.dst, ',')
			}
			first = false
			return d.value(s.Items(), depth+1)
		})
		d.dst = append(d.dst, ']')
		return err
	case *avro.MapSchema:
		d.dst = append(d.dst, '{')
		first := true
		err := d.blocks(func() error {
			if !first {
				d.dst = append(d.dst, ',')
			}
			first = false
			n, err := d.long()
			if err != nil {
				return err
			}
			k, err := d.take(n)
			if err != nil {
				return err
			}
			d.dst = AppendQuoted(d.dst, string(k))
			d.dst = append(d.dst, ':')
			return d.value(s.Values(), depth+1)
		})
		d.dst = append(d.dst, '}')
		return err
	case *avro.RecordSchema:
		d.dst = append(d.dst, '{')
		for i, f := range s.Fields() {
			if i > 0 {
				d.dst = append(d.dst, ',')
			}
			d.dst = AppendQuoted(d.dst, f.Name())
			d.dst = append(d.dst, ':')
			if err := d.value(f.Type(), depth+1); err != nil {
				return fmt.Errorf("field %s: %w", f.Name(), err)
			}
		}
		d.dst = append(d.dst, '}')
		return nil
	case *avro.UnionSchema:
		i, err := d.long()
		if err != nil {
			return err
		}
		if i < 0 || i >= int64(len(s.Types())) {
			return fmt.Errorf("union has no branch %d", i)
		}
		return d.value(s.Types()[i], depth+1)
	}
	return fmt.Errorf("unsupported Avro schema %T", s)
}

// blocks reads an array's or map's blocks: a count, negative when a byte
// size follows, then that many items, until a count of 0.
func (d *avroDec) blocks(item func() error) error {
	for {
		n, err := d.long()
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if n < 0 {
			if n == math.MinInt64 {
				return errors.New("block count out of range")
			}
			n = -n
			if _, err := d.long(); err != nil { // the block's size in bytes
				return err
			}
		}
		for ; n > 0; n-- {
			if err := item(); err != nil {
				return err
			}
			if len(d.dst) > d.limit {
				return errDecodedTooLarge
			}
		}
	}
}

func (d *avroDec) primitive(s *avro.PrimitiveSchema) error {
	var logical avro.LogicalType
	if l := s.Logical(); l != nil {
		logical = l.Type()
	}
	switch s.Type() {
	case avro.Boolean:
		b, err := d.take(1)
		if err != nil {
			return err
		}
		switch b[0] {
		case 0:
			d.dst = append(d.dst, "false"...)
		case 1:
			d.dst = append(d.dst, "true"...)
		default:
			return fmt.Errorf("boolean byte %d", b[0])
		}
	case avro.Int, avro.Long:
		v, err := d.long()
		if err != nil {
			return err
		}
		if s.Type() == avro.Int && (v < math.MinInt32 || v > math.MaxInt32) {
			return fmt.Errorf("int %d out of range", v)
		}
		d.dst = appendLogicalInt(d.dst, v, logical)
	case avro.Float:
		b, err := d.take(4)
		if err != nil {
			return err
		}
		d.dst = appendFloat(d.dst, float64(math.Float32frombits(binary.LittleEndian.Uint32(b))), 32)
	case avro.Double:
		b, err := d.take(8)
		if err != nil {
			return err
		}
		d.dst = appendFloat(d.dst, math.Float64frombits(binary.LittleEndian.Uint64(b)), 64)
	case avro.String, avro.Bytes:
		n, err := d.long()
		if err != nil {
			return err
		}
		b, err := d.take(n)
		if err != nil {
			return err
		}
		switch {
		case logical == avro.Decimal:
			d.dst = appendDecimalString(d.dst, b, s.Logical().(*avro.DecimalLogicalSchema).Scale())
		case s.Type() == avro.Bytes:
			d.dst = appendBytesJSON(d.dst, b)
		default:
			d.dst = AppendQuoted(d.dst, string(b))
		}
	default:
		return fmt.Errorf("unsupported Avro type %q", s.Type())
	}
	return nil
}

// appendLogicalInt writes an int or long, as its logical type's string
// form when it has one.
func appendLogicalInt(dst []byte, v int64, logical avro.LogicalType) []byte {
	var t time.Time
	layout := ""
	switch logical {
	case avro.Date:
		t, layout = time.Unix(v*86400, 0), "2006-01-02"
	case avro.TimeMillis:
		t, layout = time.UnixMilli(v), "15:04:05.999"
	case avro.TimeMicros:
		t, layout = time.UnixMicro(v), "15:04:05.999999"
	case avro.TimestampMillis:
		t, layout = time.UnixMilli(v), "2006-01-02T15:04:05.999Z07:00"
	case avro.TimestampMicros:
		t, layout = time.UnixMicro(v), "2006-01-02T15:04:05.999999Z07:00"
	case avro.LocalTimestampMillis:
		t, layout = time.UnixMilli(v), "2006-01-02T15:04:05.999"
	case avro.LocalTimestampMicros:
		t, layout = time.UnixMicro(v), "2006-01-02T15:04:05.999999"
	default:
		return strconv.AppendInt(dst, v, 10)
	}
	dst = append(dst, '"')
	dst = t.UTC().AppendFormat(dst, layout)
	return append(dst, '"')
}

func appendFloat(dst []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(dst, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(dst, `"-Infinity"`...)
	}
	return strconv.AppendFloat(dst, f, 'g', -1, bits)
}

// appendDecimalString writes the decimal whose unscaled value is b, big-endian
// two's complement, as a string of its digits with scale of them after the
// point.
func appendDecimalString(dst, b []byte, scale int) []byte {
	n := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(len(b))*8))
	}
	digits := n.String()
	neg := digits[0] == '-'
	if neg {
		digits = digits[1:]
	}
	dst = append(dst, '"')
	if neg {
		dst = append(dst, '-')
	}
	if scale <= 0 {
		dst = append(dst, digits...)
		return append(dst, '"')
	}
	for len(digits) <= scale {
		digits = "0" + digits
	}
	dst = append(dst, digits[:len(digits)-scale]...)
	dst = append(dst, '.')
	dst = append(dst, digits[len(digits)-scale:]...)
	return append(dst, '"')
}

// appendBytesJSON writes bytes as a JSON string when they are UTF-8, else as
// {"base64": "..."} (standard encoding, with padding).
func appendBytesJSON(dst, b []byte) []byte {
	if utf8.Valid(b) {
		return AppendQuoted(dst, string(b))
	}
	return AppendBase64(dst, b)
}

// AppendBase64 appends {"base64": "..."}: b in standard base64 with padding.
func AppendBase64(dst, b []byte) []byte {
	dst = append(dst, `{"base64":"`...)
	dst = base64.StdEncoding.AppendEncode(dst, b)
	return append(dst, `"}`...)
}

// AppendQuoted appends s as a JSON string: ", \ and control characters
// escaped, invalid UTF-8 as U+FFFD, everything else as it is (no HTML
// escaping).
func AppendQuoted(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			dst = append(dst, c)
			i++
			continue
		}
		if c < utf8.RuneSelf {
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, `\ufffd`...)
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}
