package console

import (
	"encoding/base64"
	"html/template"

	"github.com/skip2/go-qrcode"
)

// qrSize is the side of a QR code's PNG in pixels: large enough for a
// phone's camera across a desk, small enough to inline (a link URL makes
// a PNG of about 1 KiB).
const qrSize = 256

// qrDataURL is a QR code of s as an inline PNG (a data: URL, which the
// console's CSP admits for images, img-src 'self' data:). The error
// correction is medium (15 %): a printed or photographed code survives a
// smudge. github.com/skip2/go-qrcode: pure Go, no dependencies, in wide
// use, and it renders the PNG itself.
func qrDataURL(s string) (template.URL, error) {
	png, err := qrcode.Encode(s, qrcode.Medium, qrSize)
	if err != nil {
		return "", err
	}
	// html/template refuses data: URLs it did not see typed: this one is
	// built here from a PNG, never from input.
	return template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(png)), nil
}
