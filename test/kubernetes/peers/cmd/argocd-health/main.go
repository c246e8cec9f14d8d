// Command argocd-health runs an Argo CD resource health script the way Argo CD runs one from argocd-cm
// (resource.customizations.health.<group>_<kind>, useOpenLibs unset): gopher-lua with only the package, base,
// table and a reduced os library opened, a one-second deadline, the object as the global `obj` (JSON numbers
// as Lua numbers), and the returned table read back through JSON as {status, message}. A status outside
// Argo CD's health codes becomes Unknown, as in Argo CD.
//
// Usage: argocd-health SCRIPT.lua < objects.jsonl
// One JSON object per input line; one JSON answer per output line:
// {"status":"Healthy","message":"..."} or {"error":"..."} when Argo CD would report the script as failing.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	lua "github.com/yuin/gopher-lua"
	luajson "layeh.com/gopher-json"
)

type answer struct {
	Status  string `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
	Error   string `json:"error,omitempty"`
}

var healthCodes = map[string]bool{
	"Unknown": true, "Progressing": true, "Suspended": true, "Healthy": true, "Degraded": true, "Missing": true,
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: argocd-health SCRIPT.lua < objects.jsonl")
		os.Exit(2)
	}
	script, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	scanner := bufio.NewScanner(os.Stdin)
	scanner.Buffer(make([]byte, 0, 1<<20), 16<<20)
	out := json.NewEncoder(os.Stdout)
	for scanner.Scan() {
		var object any
		decoder := json.NewDecoder(bytes.NewReader(scanner.Bytes()))
		decoder.UseNumber()
		if err := decoder.Decode(&object); err != nil {
			fmt.Fprintln(os.Stderr, "bad input line:", err)
			os.Exit(2)
		}
		if err := out.Encode(assess(string(script), object)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	if err := scanner.Err(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}

func assess(script string, object any) answer {
	state := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer state.Close()
	for _, library := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.LoadLibName, lua.OpenPackage},
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
		{lua.OsLibName, openReducedOs},
	} {
		if err := state.CallByParam(lua.P{Fn: state.NewFunction(library.open), Protect: true}, lua.LString(library.name)); err != nil {
			return answer{Error: err.Error()}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	state.SetContext(ctx)
	state.SetGlobal("obj", toLua(state, object))
	if err := state.DoString(script); err != nil {
		return answer{Error: err.Error()}
	}
	returned := state.Get(-1)
	if returned.Type() != lua.LTTable {
		return answer{Error: "expect table output from Lua script, not " + returned.Type().String()}
	}
	encoded, err := luajson.Encode(returned)
	if err != nil {
		return answer{Error: err.Error()}
	}
	var health struct {
		Status  string `json:"status"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(encoded, &health); err != nil {
		return answer{Error: err.Error()}
	}
	if !healthCodes[health.Status] {
		return answer{Status: "Unknown", Message: "Lua returned an invalid health status"}
	}
	return answer{Status: health.Status, Message: health.Message}
}

// toLua converts decoded JSON the way Argo CD hands an object to a script: numbers become Lua numbers, lists
// become sequences, maps become tables, null becomes nil.
func toLua(state *lua.LState, value any) lua.LValue {
	switch typed := value.(type) {
	case bool:
		return lua.LBool(typed)
	case json.Number:
		number, err := typed.Float64()
		if err != nil {
			return lua.LString(typed.String())
		}
		return lua.LNumber(number)
	case string:
		return lua.LString(typed)
	case []any:
		table := state.CreateTable(len(typed), 0)
		for _, item := range typed {
			table.Append(toLua(state, item))
		}
		return table
	case map[string]any:
		table := state.CreateTable(0, len(typed))
		for key, item := range typed {
			table.RawSetH(lua.LString(key), toLua(state, item))
		}
		return table
	}
	return lua.LNil
}

// openReducedOs registers an os table with only time and date, the functions Argo CD leaves to scripts.
func openReducedOs(state *lua.LState) int {
	reduced := state.NewTable()
	state.Push(state.NewFunction(lua.OpenOs))
	state.Push(lua.LString(lua.OsLibName))
	state.Call(1, 1)
	opened, ok := state.Get(-1).(*lua.LTable)
	state.Pop(1)
	if ok {
		for _, name := range []string{"time", "date"} {
			reduced.RawSetString(name, opened.RawGetString(name))
		}
	}
	state.SetGlobal(lua.OsLibName, reduced)
	state.Push(reduced)
	return 1
}
