package stack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
)

// KEDAReading is one line of KEDA's scaler's output (test/keda): what it said of one trigger.
type KEDAReading struct {
	ScaledObject string `json:"scaledObject"`
	Consumer     string `json:"consumer"`
	Active       bool   `json:"active"`
	Lag          int64  `json:"lag"`
	// Error is the scaler's error: KEDA would count a failure towards the fallback.
	Error string `json:"error"`
}

func (r KEDAReading) String() string {
	if r.Error != "" {
		return fmt.Sprintf("%s: error %q", r.Consumer, r.Error)
	}
	return fmt.Sprintf("%s: active=%t lag=%d", r.Consumer, r.Active, r.Lag)
}

// ReadKEDA has KEDA's scaler (KEDAScalerBinary) read every trigger of the ScaledObjects in
// file once, as KEDA's operator does each polling interval.
func ReadKEDA(scaler, file string) ([]KEDAReading, error) {
	var stderr bytes.Buffer
	cmd := exec.Command(scaler, "-f", file)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("kedascaler: %v\n%s", err, stderr.String())
	}
	var readings []KEDAReading
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var r KEDAReading
		if err := dec.Decode(&r); err != nil {
			return nil, fmt.Errorf("kedascaler's output: %v\n%s", err, out)
		}
		readings = append(readings, r)
	}
	return readings, nil
}
