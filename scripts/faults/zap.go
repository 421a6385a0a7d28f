package faults

import (
	"os"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

func zapcoreFor(f *os.File) zapcore.Core {
	return zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(f), zapcore.InfoLevel)
}
