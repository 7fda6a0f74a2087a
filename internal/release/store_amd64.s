//go:build amd64 && !race

#include "textflag.h"

// func Store64(p *uint64, v uint64)
// A plain MOV: x86-TSO orders it after every earlier load and store.
TEXT ·Store64(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), AX
	MOVQ v+8(FP), BX
	MOVQ BX, (AX)
	RET
