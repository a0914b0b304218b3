// Debian's libqrencode-dev (qrencode.h), seen by Swift as is: QRcode_encodeData
// and QRcode_free are plain functions, so nothing needs wrapping.
#ifndef COUNTDOWN_QRENCODE_SHIM_H
#define COUNTDOWN_QRENCODE_SHIM_H

#include <qrencode.h>

#endif
