#include "textflag.h"

// func prefetchSlot(p *byte)
TEXT ·prefetchSlot(SB),NOSPLIT,$0-8
	MOVQ p+0(FP), AX
	BYTE $0x0F; BYTE $0x0D; BYTE $0x08             // PREFETCHW (AX); Go's assembler has no mnemonic for it
	BYTE $0x0F; BYTE $0x0D; BYTE $0x48; BYTE $0x40 // PREFETCHW 64(AX)
	RET
