package dataplane

import (
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
)

// attachPassXDP attaches, for plain-xdp, a program that passes every
// frame (XDP_PASS) to r3's end of the underlay: a veth copies each frame
// with page fragments for XDP, whatever the program does, and this
// measures that alone.
func (p *path) attachPassXDP() error {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "pass", Type: ebpf.XDP, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 2), asm.Return()}, // XDP_PASS
	})
	if err != nil {
		return fmt.Errorf("load the pass-through XDP program: %w", err)
	}
	defer prog.Close() // the link holds it
	iface := p.lastHop.Iface(p.r3)
	l, err := p.r3.NL.LinkByName(iface)
	if err != nil {
		return fmt.Errorf("find %s in r3: %w", iface, err)
	}
	var xl link.Link
	err = p.r3.NS.Do(func() (err error) {
		xl, err = link.AttachXDP(link.XDPOptions{Program: prog, Interface: l.Attrs().Index, Flags: link.XDPDriverMode})
		return err
	})
	if err != nil {
		return fmt.Errorf("attach XDP to %s in r3: %w", iface, err)
	}
	p.passXDP = xl
	return nil
}
