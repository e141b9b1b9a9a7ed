package dataplane

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
)

// layoutOf names what a map holds: its type, flags and the layout of its
// keys and values down to every field's offset and size, from the
// programs' BTF. Two maps of the same layout may stand in for each other
// whatever their sizes; a lispd whose programs read a field elsewhere
// must not adopt the map of another that wrote it (adopt.go).
func layoutOf(m *ebpf.MapSpec) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s flags %#x key %d ", m.Type, m.Flags, m.KeySize)
	describe(&b, m.Key)
	fmt.Fprintf(&b, " value %d ", m.ValueSize)
	describe(&b, m.Value)
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:8])
}

// describe writes t's memory layout: names and offsets of fields, sizes
// and signedness of integers, lengths of arrays, values of enums.
// Typedefs and qualifiers are looked through.
func describe(b *strings.Builder, t btf.Type) {
	switch t := btf.UnderlyingType(t).(type) {
	case nil, *btf.Void:
		b.WriteString("void")
	case *btf.Int:
		fmt.Fprintf(b, "int%d/%s", t.Size*8, t.Encoding)
	case *btf.Pointer:
		b.WriteString("ptr")
	case *btf.Enum:
		fmt.Fprintf(b, "enum%d{", t.Size*8)
		for _, v := range t.Values {
			fmt.Fprintf(b, "%s=%d,", v.Name, v.Value)
		}
		b.WriteString("}")
	case *btf.Array:
		fmt.Fprintf(b, "[%d]", t.Nelems)
		describe(b, t.Type)
	case *btf.Struct:
		members(b, "struct", t.Size, t.Members)
	case *btf.Union:
		members(b, "union", t.Size, t.Members)
	case *btf.Datasec:
		fmt.Fprintf(b, "section%d{", t.Size)
		for _, v := range t.Vars {
			name := ""
			if vr, ok := v.Type.(*btf.Var); ok {
				name = vr.Name
			}
			fmt.Fprintf(b, "%s@%d:", name, v.Offset)
			describe(b, v.Type)
			b.WriteString(",")
		}
		b.WriteString("}")
	case *btf.Var:
		describe(b, t.Type)
	default:
		fmt.Fprintf(b, "%T", t)
	}
}

func members(b *strings.Builder, kind string, size uint32, ms []btf.Member) {
	fmt.Fprintf(b, "%s%d{", kind, size)
	for _, m := range ms {
		fmt.Fprintf(b, "%s@%d", m.Name, m.Offset)
		if m.BitfieldSize > 0 {
			fmt.Fprintf(b, ":%db", m.BitfieldSize)
		}
		b.WriteString(":")
		describe(b, m.Type)
		b.WriteString(",")
	}
	b.WriteString("}")
}
